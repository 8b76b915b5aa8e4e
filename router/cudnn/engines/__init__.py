"""cudnn.engines: the engine contract, the engine manifest and the router.

Importing this package imports no engine and no backend: engines are loaded lazily from
the manifest (module path + class name) when a graph of their family is planned, and the
backend adapter only when a backend-lowerable graph is planned. Modules: base (contract),
engine_ids, manifest, planning_state (what is kept per graph, analyzers' memos included),
heuristics (ranking), router, explain, and graph_api (the functions behind pygraph's
plan-list methods). Knowledge of particular ops (the linear-attention facts record) lives
with the engines that need it, not here.
"""
