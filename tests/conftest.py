import os

# Tests never download: a pretrained-weights request must fail fast instead of hanging.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
