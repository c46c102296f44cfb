import type { Config } from '../config/index.js'
import { composeInterceptors } from '../extensions/compose.js'
import type { InterceptorChains } from '../extensions/compose.js'
import { ExtensionRegistry } from '../extensions/registry.js'
import { routeCodeTools } from '../interceptors/builtins/route-code-tools.js'
import { routeShellTools } from '../interceptors/builtins/route-shell-tools.js'
import { secretScanner } from '../interceptors/builtins/secret-scanner.js'
import type { ToolCallInterceptor } from '../interceptors/types.js'
import type { LifecycleDispatcher } from '../lifecycle/dispatcher.js'

/**
 * The server's interceptor chains: the config's policy (shell and code routing, the secret
 * scanner) then the configured extensions, loaded here. Their lifecycle hooks join `lifecycle`.
 */
export async function buildChains(
  config: Config,
  lifecycle: LifecycleDispatcher,
): Promise<InterceptorChains> {
  const extensions = config.extensions.length
    ? (await ExtensionRegistry.of().load(config.extensions)).snapshot()
    : undefined
  const chains = composeInterceptors({ toolCall: hostInterceptors(config) }, extensions)
  for (const hook of chains.lifecycleHooks) lifecycle.register(hook)
  return chains
}

/** The tool-call interceptors the config asks for (`routing.shell`, `routing.code`, `routing.secretScanner`). */
function hostInterceptors(config: Config): ToolCallInterceptor[] {
  const { shell, code, secretScanner: scan } = config.routing
  const host: ToolCallInterceptor[] = [
    routeShellTools({ providerId: shell.providerId, profile: shell.profile }),
  ]
  if (code)
    host.push(
      routeCodeTools({
        providerId: code.providerId,
        profile: code.profile,
        language: code.language,
        ...(code.tools ? { tools: code.tools } : {}),
      }),
    )
  if (scan !== 'off') host.push(secretScanner({ action: scan }))
  return host
}
