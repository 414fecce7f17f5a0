# vgpu-warden image: `docker build -t vgpu-warden:0.1.0 .` (the tag manifests/deployment.yaml uses).
# The build stage compiles the TypeScript and drops the dev dependencies; the runtime stage holds only
# dist/, the production node_modules and package.json, and runs as a non-root user.

FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:24-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Numeric, so that Kubernetes can check runAsNonRoot; the Deployment runs it as 10001 too.
USER 10001:10001
EXPOSE 9443 9395
ENTRYPOINT ["node", "dist/main.js"]
CMD ["serve"]
