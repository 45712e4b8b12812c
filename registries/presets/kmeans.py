# K-means reference (docs/methods.md#k-means). Discrepancy 13: the paper cites k-means++ with 300
# iterations; the code uses random init, one init and 200 iterations.
equations = dict(init="k-means++", n_init=1, max_iter=300)
code = dict(init="random", n_init=1, max_iter=200, features=dict(policy="code"))
# What `bench tune` searches (docs/settings.md#tuning): the initialisation and the iteration cap.
_search_space = {"method.init": dict(choices=["random", "k-means++"]), "method.max_iter": dict(low=20, high=300, int=True)}
