-- Paced PUT: each connection waits 1 ms before its next request (fixed-rate-ish load).
wrk.method = "PUT"
wrk.body = "0123456789abcdef"
function delay() return 1 end
