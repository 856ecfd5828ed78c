"""Models of the beliefs app arrive with its issue; the app and its migrations exist from the start."""
