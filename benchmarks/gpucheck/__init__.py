"""The GPU check (``make gpu-check``): see main.py."""
