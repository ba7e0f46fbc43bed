"""The history a harness keeps and resends: JSONL, custom and ready-made roles, preparing
another vendor's turns (handoff), and token estimates."""
