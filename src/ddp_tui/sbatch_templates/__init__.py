"""ddp_tui.sbatch_templates"""
