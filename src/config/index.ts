export { ApiKeySchema, ConfigSchema, isFleet, ModelConfigSchema, QuotaSchema } from './schema.js'
export type { Config, ConfigInput } from './schema.js'
export { CONFIG_FILES, formatZodIssues, loadConfig } from './load.js'
export type { LoadConfigOptions, LoadedConfig } from './load.js'
