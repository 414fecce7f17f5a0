#!/bin/sh
# `vgpu-warden` on the image's PATH (the Dockerfile copies this file to /usr/local/bin/vgpu-warden),
# so that `kubectl -n vgpu-warden exec deploy/vgpu-warden -- vgpu-warden locks` works: the same
# entry as the image's ENTRYPOINT, dist/bin.js, which checks the Node.js version first. Outside
# the image, npm links the package's bin (dist/bin.js) instead and this file is not used.
exec node /app/dist/bin.js "$@"
