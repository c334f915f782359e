package lockrecipe

// Test hooks into the protected create and Queue.Take, for package
// lockrecipe_test.

// WithGUID makes every attempt of the recipe use the GUID f returns.
func WithGUID(f func() string) Option {
	return func(o *options) { o.hooks.guid = f }
}

// WithFailCreate calls f before each create; when f returns an error the
// create is not sent and the recipe sees that error instead (as if the
// request had been lost on its way).
func WithFailCreate(f func(path string) error) Option {
	return func(o *options) { o.hooks.beforeCreate = f }
}

// WithLoseCreateReply calls f after each create that succeeded; when f
// returns an error the recipe sees that error instead of the reply (as if
// the create had reached the log and its reply had been lost).
func WithLoseCreateReply(f func(created string) error) Option {
	return func(o *options) { o.hooks.afterCreate = f }
}

// WithQueueMissing calls f when Queue.Take found no node at the queue's
// path, before it sets a watch for its creation (so that f can create it in
// between).
func WithQueueMissing(f func(path string)) Option {
	return func(o *options) { o.hooks.queueMissing = f }
}
