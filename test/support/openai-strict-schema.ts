/*
 * OpenAI's rules for a strict-mode function tool (`strict: true`, Structured Outputs), as a checker
 * for the tool definitions a framework actually sends: every object lists all its properties in
 * `required` and has `additionalProperties: false`, the root is an object, and only the supported
 * keywords appear (no `minLength`, `default`, `oneOf`, …). An optional argument is expressed by a
 * type that admits `null`.
 */

/** Keywords strict mode accepts (annotations included). */
const SUPPORTED = new Set([
  '$schema',
  '$defs',
  '$ref',
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'anyOf',
  'enum',
  'const',
  'description',
  'title',
  'pattern',
  'format',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
])

type Schema = Record<string, unknown>

const isSchema = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v)

/** What makes `schema` unacceptable as the parameters of a strict function tool (empty when none). */
export function strictSchemaProblems(schema: unknown, path = '$'): string[] {
  if (!isSchema(schema)) return [`${path}: not a schema object`]
  const problems: string[] = []
  if (path === '$' && schema['type'] !== 'object') problems.push(`$: the root must be type object`)
  for (const key of Object.keys(schema))
    if (!SUPPORTED.has(key)) problems.push(`${path}: keyword ${key} is not supported in strict mode`)
  const types = ([] as unknown[]).concat(schema['type'] ?? [])
  if (types.includes('object') || isSchema(schema['properties'])) {
    const props = isSchema(schema['properties']) ? schema['properties'] : {}
    if (schema['additionalProperties'] !== false)
      problems.push(`${path}: objects need additionalProperties: false`)
    const required = Array.isArray(schema['required']) ? (schema['required'] as unknown[]) : []
    for (const name of Object.keys(props))
      if (!required.includes(name)) problems.push(`${path}: property ${name} is not in required`)
    for (const [name, sub] of Object.entries(props))
      problems.push(...strictSchemaProblems(sub, `${path}.${name}`))
  }
  if (schema['items'] !== undefined) problems.push(...strictSchemaProblems(schema['items'], `${path}[]`))
  if (Array.isArray(schema['anyOf']))
    schema['anyOf'].forEach((s, i) => problems.push(...strictSchemaProblems(s, `${path}|${i}`)))
  if (isSchema(schema['$defs']))
    for (const [name, sub] of Object.entries(schema['$defs']))
      problems.push(...strictSchemaProblems(sub, `${path}.$defs.${name}`))
  return problems
}

/** Whether `schema` admits `null` (`type` including `null`, or an `anyOf` branch that does). */
export function admitsNull(schema: unknown): boolean {
  if (!isSchema(schema)) return false
  if (([] as unknown[]).concat(schema['type'] ?? []).includes('null')) return true
  if (Array.isArray(schema['enum']) && schema['enum'].includes(null)) return true
  return Array.isArray(schema['anyOf']) && schema['anyOf'].some(admitsNull)
}
