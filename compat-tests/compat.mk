# Installs what compat tests need. Filled in by the compat-tests work.
compat-deps:
	@true
