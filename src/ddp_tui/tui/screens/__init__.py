"""The app's screens: jobs, compose, run detail, compare, help."""
