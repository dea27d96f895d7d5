"""The Textual app: screens, widgets and styles, over the cluster facade.

The app owns one :class:`~ddp_tui.tui.cluster_io.ClusterIO`, the only caller of the facade:
screens post requests to it and get their results back by message (docs/architecture.md,
"How data flows"). Compose's form is generated from the spec's field descriptions
(:mod:`.form`).
"""
