# EwC (methods-spec §3.6, methods-sources §1.1: FACIL's EwC). Discrepancy 14: λ 8000 in the paper, 10000
# in every script; α = 0.5 in both.
_base_ = ["./finetuned.py"]
paper = dict(ewc_lambda=8000.0, fisher_alpha=0.5)
code = dict(ewc_lambda=10000.0)
