"""The runs as the app and the CLI see them: the observation pass (:mod:`.observation`), the
reactions applied after it in one explicit stage (:mod:`.reactions`), and the service that
puts them together into snapshots, follows, checklists and diagnoses (:mod:`.service`)."""
