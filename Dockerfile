# The ataman container image: one static binary on `scratch`, nothing else
# (docs/DEPLOY.md, "Container image").
#
# The build context is not this repository: `scripts/image build` makes it,
# holding exactly
#   ataman   the binary, linked statically (x86_64-unknown-linux-gnu with
#            -C target-feature=+crt-static), so it needs no library
#   data/    an empty directory, the data directory's place in the image
# and runs `docker build -f Dockerfile CONTEXT`. Nothing is pulled: the
# base is `scratch`, so it builds with no registry reachable.
#
#   docker run -p 127.0.0.1:19234:19234 IMAGE serve --listen 0.0.0.0:19234 --allow-unauthenticated
FROM scratch

COPY ataman /ataman
# `scratch` has no shell, so no `mkdir` or `chown` can run here: the empty
# directory comes from the context, owned by the node's user (below). An
# anonymous or named volume on /data starts as a copy of it, owner
# included; a bind-mounted host directory needs `chown 10001:10001`.
COPY --chown=10001:10001 data /data

# Defaults for a container (flags override them): listen on every
# interface of the container, not its loopback, so a published port
# reaches the node (protected mode then wants tokens or
# --allow-unauthenticated, docs/SECURITY.md); keep the data in the volume.
ENV ATAMAN_LISTEN=0.0.0.0:19234 ATAMAN_DATA_DIR=/data
VOLUME ["/data"]
# The HTTP API (--listen) and the Redis protocol (--resp-listen, off unless
# given: `--resp-listen 0.0.0.0:6379`).
EXPOSE 19234 6379
# The node's user: numeric, as `scratch` has no /etc/passwd; not root.
USER 10001:10001
WORKDIR /data
ENTRYPOINT ["/ataman"]
CMD ["--help"]
