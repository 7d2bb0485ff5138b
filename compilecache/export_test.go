package compilecache

// Joined is how many callers are inside Get on an entry another caller made: the tests wait for
// every caller to be either compiling or joined before they let a compile finish, so a late
// caller cannot pass for a waiter.
func Joined(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.joined
}
