"""ddp_tui.remote"""
