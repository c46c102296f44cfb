#!/usr/bin/env node
// The `sbx` command. Runs the built CLI when `npm run build` has produced it, else the TypeScript
// sources through tsx (a runtime dependency), so a fresh clone works without a build step.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const built = join(root, 'dist', 'src', 'cli', 'main.js')
if (existsSync(built)) {
  await import(pathToFileURL(built).href)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  await import(pathToFileURL(join(root, 'src', 'cli', 'main.ts')).href)
}
