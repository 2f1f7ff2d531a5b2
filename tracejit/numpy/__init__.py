"""The traced NumPy namespace: the Tensor proxy, NumPy's functions, ufuncs and methods on it, building the graph
IR (it stands on ir/ alone)."""
