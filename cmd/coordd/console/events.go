package console

import "net/http"

func (c *Console) handleWatch(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, "Unimplemented", "not yet")
}
