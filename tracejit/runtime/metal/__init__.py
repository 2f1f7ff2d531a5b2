"""The metal target through PyObjC's Metal bindings."""
