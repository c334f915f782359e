package bench

// opsWorkload is how a workload whose clients run one op back to back
// (write, read, read-sync, create-eph, session, lock) sets up its run;
// runOps does the rest.
type opsWorkload struct {
	// dir is its directory under Config.Root, created unless makesDir.
	dir string
	// makesDir: its recipe creates the directory itself (lock).
	makesDir bool
	// ownSessions: each op opens a session of its own, so the workers
	// have none (the session workload).
	ownSessions bool
	// prepare readies the workers (their sessions open) and returns
	// their op; it may fill in r. dir is the directory's path.
	prepare func(b *Bench, s Spec, r *Result, dir string, workers []*worker) (opFunc, error)
}

// runOps runs spec s of an op workload: its directory, s.Clients workers
// (each a session, spread over the servers), the op back to back through
// the warm-up and the measured time; one result.
func (b *Bench) runOps(s Spec, o opsWorkload) ([]Result, error) {
	r := b.result(s)
	dir := b.cfg.Root + "/" + o.dir
	if !o.makesDir {
		if err := b.ensure(dir); err != nil {
			return nil, err
		}
	}
	workers, sessions, err := b.newWorkers(s.Clients, o.ownSessions, &r)
	if err != nil {
		return nil, err
	}
	defer b.closeAll(sessions)
	op, err := o.prepare(b, s, &r, dir, workers)
	if err != nil {
		return nil, err
	}
	if _, _, err := b.runWorkers(s, &r, workers, op); err != nil {
		return nil, err
	}
	return []Result{r}, nil
}
