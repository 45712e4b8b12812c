# K-means reference (docs/methods.md#k-means). Discrepancy 13: the paper cites k-means++ with 300
# iterations; the code uses random init, one init and 200 iterations.
equations = dict(init="k-means++", n_init=1, max_iter=300)
code = dict(init="random", n_init=1, max_iter=200, features=dict(policy="code"))
