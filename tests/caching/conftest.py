"""The cache tests: in process, and shared in a real Redis server (``memory.stores_fixtures``)."""

from memory.stores_fixtures import redis_url

__all__ = ["redis_url"]  # the Redis server's fixture, for this folder
