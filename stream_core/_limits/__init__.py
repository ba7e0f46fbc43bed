"""Rate limits: what vendors say of them on every response, and (to come) a limiter that
learns from it, shared by a fleet."""
