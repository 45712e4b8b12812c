# DER (docs/methods.md#der). Discrepancy 15 (docs/methods.md#discrepancy-15): a buffer of 500 per step in the paper;
# DER's own scripts (scripts_il_der/) use 500 or 200 per dataset/split, with their own epochs (warm-up =
# main: 80, 50, 40 or 35) and batch sizes (128 or 256): `code`, the default, runs them. `equations`
# keeps the paper's buffer of 500 and takes the scripts' epochs and batches, which the paper does not give.
_base_ = ["./finetuned.py"]
equations = dict(buffer_size=500, der_alpha=0.5)
_schedule = {
    "cifar10/2-step": dict(buffer_size=500, warmup_epochs=80, epochs=80, batch_size=128),
    "cifar10/5-step": dict(buffer_size=200, warmup_epochs=50, epochs=50, batch_size=128),
    "cifar100": dict(buffer_size=500, warmup_epochs=80, epochs=80, batch_size=128),
    "cub200/2-step": dict(buffer_size=500, warmup_epochs=80, epochs=80, batch_size=128),
    "cub200/5-step": dict(buffer_size=200, warmup_epochs=40, epochs=40, batch_size=256),
    "herbarium19/2-step": dict(buffer_size=200, warmup_epochs=50, epochs=50, batch_size=128),
    "herbarium19/5-step": dict(buffer_size=200, warmup_epochs=40, epochs=40, batch_size=256),
    "tinyimagenet/2-step": dict(buffer_size=200, warmup_epochs=40, epochs=40, batch_size=256),
    "tinyimagenet/5-step": dict(buffer_size=200, warmup_epochs=35, epochs=35, batch_size=256),
}
overrides = dict(code=_schedule,
                 equations={key: {k: v for k, v in values.items() if k != "buffer_size"} for key, values in _schedule.items()})
