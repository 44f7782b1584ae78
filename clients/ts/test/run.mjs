// Runs node's test runner on the files given, with --experimental-websocket where this Node
// has the flag and no global WebSocket yet (Node 20), so that the platform WebSocket transport
// is tested too; Node 22 has the global already.
import { spawnSync } from 'node:child_process';

const flags = typeof globalThis.WebSocket !== 'function' && process.allowedNodeEnvironmentFlags.has('--experimental-websocket') ? ['--experimental-websocket'] : [];
const r = spawnSync(process.execPath, [...flags, '--test', ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(r.status ?? 1);
