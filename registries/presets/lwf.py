# LwF (docs/methods.md#lwf). Discrepancy 16: the code distils in the reversed
# direction (−Σ p_new log p_old), which produced the paper's numbers (`code`, the default); `equations`
# uses LwF's own (−Σ p_old log p_new). Both: T = 2, weight 1,
# view 1 only, one term per old head, summed.
_base_ = ["./finetuned.py"]
equations = dict(kd_weight=1.0, kd_temperature=2.0, kd_direction="standard")
code = dict(kd_direction="reversed")
