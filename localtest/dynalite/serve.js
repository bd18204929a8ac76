'use strict'
// serve.js runs dynalite's own command (node_modules/dynalite/cli.js, with
// the same flags), except that a client that drops its connection while
// it sends a request no longer ends the server.
//
// dynalite 4.0.0 throws on a request's 'error' event ('aborted',
// ECONNRESET) and nothing catches it. A test process killed while it sent
// a request (go test's timeout, a mutant that loops under make mutate)
// therefore stopped the server, and every test after it failed as if the
// code under test had. The dropped request had not been read, so nothing
// was written; any other uncaught error still ends the process, as Node
// ends it.
process.on('uncaughtException', (err) => {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') {
    console.error('dynalite: a client dropped its connection mid-request; the request was discarded')
    return
  }
  console.error(err)
  process.exit(1)
})

require('dynalite/cli.js')
