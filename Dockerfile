# vgpu-warden image: `docker build -t vgpu-warden:0.1.0 .` (the tag manifests/deployment.yaml uses).
# The build stage compiles the TypeScript and drops the dev dependencies and the stand-ins workspace
# package (packages/stand-ins: the HAMi plugin and real-node stand-ins, gRPC; the build needs it only for
# the types of `local`'s lazy import); the runtime stage holds only dist/, the production node_modules,
# package.json and a `vgpu-warden` wrapper on the PATH, and runs as a non-root user.
#
# `npm run image` (tools/image/build.sh) builds the same runtime stage with buildah, without a
# Docker engine: it builds the app on the host and turns the runtime stage below into a
# Containerfile that copies the host's build (every `COPY --from=build /app/X` becomes `COPY X`),
# so keep the runtime stage to COPY --from=build lines of that form.

# Any Node 24 image; tools/image/build.sh passes a local Debian bookworm + Node 24 base where no
# registry is reachable.
ARG NODE_IMAGE=node:24-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/stand-ins/package.json ./packages/stand-ins/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY packages/stand-ins/tsconfig.build.json ./packages/stand-ins/
COPY packages/stand-ins/src ./packages/stand-ins/src
COPY src ./src
# The production tree of the root alone: the stand-ins package leaves the tree and package.json's
# workspaces first (`npm prune --workspaces=false` keeps its link), so prune drops it and its gRPC.
RUN npm run build && npm pkg delete workspaces && rm -rf packages node_modules/@vgpu-warden \
  && npm prune --omit=dev --no-audit --no-fund && find node_modules -maxdepth 1 -type d -empty -delete

FROM ${NODE_IMAGE}
# CERT_DIR: where `serve` keeps its CA and serving certificate when no CERT_SECRET_NAME is set
# (the Deployment sets one). The default of a checkout, ./webhook-certs, would be /app/webhook-certs,
# which uid 10001 cannot create; /tmp is writable by any uid and is the emptyDir the Deployment
# mounts under its read-only root filesystem. The directory is made 0700 on first use.
ENV NODE_ENV=production \
    CERT_DIR=/tmp/vgpu-warden/webhook-certs
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# `vgpu-warden` on the PATH, for `kubectl exec deploy/vgpu-warden -- vgpu-warden locks`: a two-line
# sh wrapper running dist/bin.js (executable in git; COPY keeps its mode, and a symlink would need a
# RUN, which the buildah build's runtime stage does not have).
COPY --from=build /app/src/commands/vgpu-warden.sh /usr/local/bin/vgpu-warden
# Numeric, so that Kubernetes can check runAsNonRoot; the Deployment runs it as 10001 too.
USER 10001:10001
EXPOSE 9443 9444 9395
# dist/bin.js, the package's `bin` entry, rather than dist/main.js: the same entry operators run
# outside the image, and on a base with too old a Node (NODE_IMAGE is a build argument) it says
# which version is needed instead of crashing at import inside the Kubernetes client.
ENTRYPOINT ["node", "dist/bin.js"]
CMD ["serve"]
