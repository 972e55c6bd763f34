-- PUT with a short (16-byte) body; the request is built once by wrk.
wrk.method = "PUT"
wrk.body = "0123456789abcdef"
