"""Routes: one call over several deployments, falling over before content, never after."""
