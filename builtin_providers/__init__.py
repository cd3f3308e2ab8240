"""Built-in provider types: static, file_corpus, memory and http, registered via entry points."""
