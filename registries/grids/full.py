# The paper grid over three seeds (mean ± std in the reports).
_base_ = ["./paper.py"]
seeds = [0, 1, 2]
