# VB-CGCD (docs/methods.md#vb-cgcd), from the authors' code github daihao42/VB-CGCD (commit 7fe9501):
# `main.py`'s argparse defaults, which every command of its `run.sh` and README keeps for these keys (the
# four datasets' commands change only --base, --increment, --num_classes, --dataset and the paths; bench
# takes those from the split), and scikit-learn's GaussianMixture defaults that `clustering/gmm.py` uses.
# The paper's method section could not be read here (only its abstract), so `equations` holds the code's
# values too and `code` changes no method key: it only sets `features.policy="code"`, as every default
# preset does (this method reads no augmented view). Hard-coded in the code, hence no key: Adam's betas and
# eps (optax defaults) and the schedule (`classifier/mngmm.py` run_inference, methods/vb_cgcd.py).
equations = dict(
    pca_dim=384,  # main.py --num_dim 384: PCA components fitted on the labelled step (mngmm.py pre_processing)
    svi_iters=1000,  # main.py --n_epochs 1000: SVI steps, one minibatch each (mngmm.py run_inference)
    lr=4e-6,  # main.py --lr 4e-6: Adam's base rate, warmed up to 10× over 100 steps, then ×0.85 per 500
    batch_size=128,  # main.py --batch-size 128: the plate's subsample size (mngmm.py model)
    early_stop=True,  # main.py --with_early_stop (default True): the covariance-determinant stop
    correct_scaling=True,  # main.py --use_correct_scaling_factor (default True): round 2's s = sqrt(C/(offset+C))
    gmm_max_iter=100,  # clustering/gmm.py: GaussianMixture(n_components=increment), sklearn's max_iter
    gmm_n_init=1,  # sklearn's n_init
    gmm_reg_covar=1e-6,  # sklearn's reg_covar
)
code = dict(features=dict(policy="code"))
