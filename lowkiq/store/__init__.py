"""Everything lowkiq keeps in Redis: keys, Lua scripts, writes, reads, actions, metrics."""
