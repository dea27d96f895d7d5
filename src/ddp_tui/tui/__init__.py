"""ddp_tui.tui"""
