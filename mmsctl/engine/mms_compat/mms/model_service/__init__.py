"""``mms.model_service``: the base classes of MMS 0.x services (``SingleNodeService`` and its MXNet kin)."""
