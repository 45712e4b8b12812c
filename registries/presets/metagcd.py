# MetaGCD (docs/methods.md#metagcd): its code's configuration (ynanwu/MetaGCD at 7a0b1d1,
# `methods/contrastive_training/contrastive_learning_based_MAML.py`'s argparse defaults, which the README's commands
# keep; `data/cifar.py`'s split config for CIFAR-100). The paper's body was not readable here, so `equations` =
# `code`. Where the code is silent or does not run, bench's choice is marked "bench:".
equations = dict(
    unfreeze=1,                  # `--grad_from_block 11`: the last block of ViT-B/16 trains (and the head)
    proj_hidden_dim=2048,        # `DINOHead(nlayers=3)`: 768 → 2048 → 2048 → 256, then weight-normed to `mlp_out_dim`
    proj_dim=256,
    head_dim=65536,              # `args.mlp_out_dim = 65536`
    sup_weight=0.5,              # `--sup_con_weight 0.5`: λ of SupCon (labelled) and of the soft loss (unlabelled)
    info_nce_temperature=1.0,    # `--temperature 1.0` (`info_nce_logits`)
    supcon_temperature=0.07,     # `SupConLoss()`'s default, the soft loss's too
    soft_threshold=0.85,         # `--soft_threshold 0.85`: the neighbours' cosine
    momentum=0.9,                # `--momentum 0.9`, every optimiser
    weight_decay=5e-5,           # `--weight_decay 5e-5`, every parameter (biases too: plain SGD)
    # the labelled step, offline: the code loads a checkpoint (`--netModel_ckpt OffTrain_*.pth`) no script makes;
    # bench: its commented session-0 pre-training (`--pretrain_steps 50 --pretrain_lr 0.1 --pretrain_bs 512`)
    offline_epochs=50,
    offline_lr=0.1,
    offline_batch_size=512,
    # the labelled step, meta-training (`--run_mode MetaTrain`)
    meta_tasks=20,               # `--epochs_task 20`
    pseudo_sessions=4,           # `pseudo_continual_session_num: 4`
    pseudo_old_ratio=0.75,       # `pseudo_old_cls_num: 60` of CIFAR-100's 80 labelled classes
    pseudo_old_held=1 / 3,       # of each pseudo-old class's 300 images, 100 dealt over the sessions (200 kept out)
    pseudo_novel_share=2 / 3,    # `pseudo_each_session_novel_sample_num: 200` of each pseudo-novel class's 300
    meta_batch_size=128,         # `--metaTrain_bs 128`
    inner_epochs=10,             # `--inner_steps 10` (epochs over a session)
    inner_lr=1e-4,               # `--inner_lr 0.0001`
    outer_steps=5,               # `--outer_steps 5`
    outer_lr=1e-5,               # `--outer_lr 0.00001`
    # the unlabelled steps (`--run_mode MetaTest`)
    epochs=20,                   # `--test_steps 20`
    lr=1e-4,                     # `--test_lr 0.0001`, constant (the scheduler is commented out)
    batch_size=128,              # `--metaTest_bs 128`, last partial batch dropped
    # bench: the centroids of its inductive predictions; scikit-learn's KMeans defaults the code ran (`test_kmeans`)
    kmeans_iters=300,
    kmeans_inits=10,
)
code = dict(features=dict(policy="code"))
