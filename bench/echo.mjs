// B1/B2 reference: the physical limit of a pipe plus JSON. A bare NDJSON echo
// loop with no library: read a line, JSON.parse it, JSON.stringify its params
// back as the result.
import { createInterface } from "node:readline";

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  const msg = JSON.parse(line);
  process.stdout.write(`{"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":${JSON.stringify(msg.params)}}\n`);
});
