"""The read model the app is handed: rows, details and snapshots (:mod:`.views`), built from
the run files (:mod:`.view_building`), and the verification checklist over them."""
