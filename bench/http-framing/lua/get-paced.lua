-- Paced GET: each connection waits 1 ms before its next request (fixed-rate-ish load).
function delay() return 1 end
