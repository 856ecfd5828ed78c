"""Models of the goals app arrive with its issue; the app and its migrations exist from the start."""
