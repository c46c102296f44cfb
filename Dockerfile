# The sandbox-router service image: one image for `sbx api`, `sbx worker` (exec and --agent) and
# `sbx serve` (docker-compose.yml runs the first two). `npm ci` runs inside the build, so the build
# needs the npm registry: where the build network has no route out, build with host networking.
#
#   docker build --network host -t sandbox-router:local .                    # official node image
#   docker build --network host --build-arg NODE_IMAGE=sandbox-router/node:20 -t sandbox-router:local .
#
# NODE_IMAGE is any Node 20 image with npm and a user `node` (uid 1000): the official
# node:20-bookworm-slim, or sandbox-router/node:20 built without a registry by
# `sbx image build --compose` (scripts/build-images.sh).
#
# The sandboxes themselves run from the base image `sandbox-router/base:latest`, which must exist on
# the Docker engine the workers use: build it there with `sbx image build` (scripts/setup.sh) from a
# checkout on that host. This image does not carry the toolchain for that, nor a compiled sbx-agent:
# its workers use the agent inside the base image; for profiles naming any other image, mount a
# static sbx-agent into the worker and point SBX_AGENT_BIN at it (README, "Any image").

# Pin by digest in production (node:20-bookworm-slim@sha256:…).
ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: compile TypeScript to dist/ --------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Every dependency with a native part (ssh2's cpu-features, msgpackr-extract) is optional, so no
# install scripts are needed; skipping them keeps third-party code from running at build time.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY providers ./providers
RUN npm run build

# ---- deps: production node_modules only ---------------------------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# ---- runtime --------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    PORT=8080
WORKDIR /app
# Code and dependencies stay root-owned (the service cannot rewrite itself); only .sbx/ is writable,
# for the generated API key when neither SBX_API_KEY nor config keys are given.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY bin ./bin
RUN mkdir -p /app/.sbx && chown node:node /app/.sbx
# `node` (uid 1000) ships with the base image. Engine access for the Docker provider is an opt-in
# of the deployment (docker-compose.docker-engine.yml), never baked in here.
USER node
EXPOSE 8080
# The API answers /healthz; workers serve no HTTP (compose disables this check for them).
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# bin/sbx.js runs dist/ when it exists (it does here), so tsx is never loaded.
ENTRYPOINT ["node", "bin/sbx.js"]
# Bind all interfaces inside the container; the fleet's Redis comes from --redis or REDIS_URL.
CMD ["api", "--host", "0.0.0.0"]
