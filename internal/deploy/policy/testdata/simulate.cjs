// Evaluates IAM requests with @cloud-copilot/iam-simulate (AGPL-3.0),
// run as a separate program by policy_test.go, never linked into snavio.
// stdin: a JSON array of iam-simulate Simulation objects; stdout: a JSON
// array of {result, errors} in the same order. NODE_PATH points at
// tools/emulators/node_modules.
const { runSimulation } = require('@cloud-copilot/iam-simulate')

let input = ''
process.stdin.on('data', (d) => (input += d))
process.stdin.on('end', async () => {
  const out = []
  for (const sim of JSON.parse(input)) {
    const r = await runSimulation(sim, {})
    if (r.resultType === 'error') {
      out.push({ result: 'error', errors: r.errors })
    } else {
      out.push({ result: r.overallResult })
    }
  }
  process.stdout.write(JSON.stringify(out))
})
