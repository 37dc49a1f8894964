//! Stdio: one session on the process's standard streams, one JSON-RPC message per line.
//!
//! Lines pass through a filter before rmcp reads them, so that a malformed line gets its
//! JSON-RPC error on stdout, as the specification asks, and the session goes on; rmcp alone
//! would skip it without an answer.

use portcullis_core::CallContext;
use rmcp::ServiceExt;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, duplex};
use tokio::sync::mpsc;

use crate::message;
use crate::server::{McpServer, ServeError};
use crate::session::{Origin, Session};

/// The buffer between the filter and rmcp, in each direction.
const PIPE_BYTES: usize = 64 * 1024;

impl McpServer {
    /// Serves one session over stdin and stdout, as `caller`, until the client closes it,
    /// with a worker that runs the decisions nobody waits for. The session gets a task id of
    /// its own.
    pub async fn serve_stdio(&self, caller: CallContext) -> Result<(), ServeError> {
        self.serve_lines(caller, tokio::io::stdin(), tokio::io::stdout())
            .await
    }

    /// [`serve_stdio`](Self::serve_stdio) over any pair of byte streams.
    pub async fn serve_lines(
        &self,
        caller: CallContext,
        input: impl AsyncRead + Send + Unpin + 'static,
        mut output: impl AsyncWrite + Send + Unpin + 'static,
    ) -> Result<(), ServeError> {
        let _worker = self.spawn_worker();
        let (server_input, mut to_server) = duplex(PIPE_BYTES);
        let (from_server, server_output) = duplex(PIPE_BYTES);
        let (lines, mut outgoing) = mpsc::channel::<Vec<u8>>(64);

        let errors = lines.clone();
        let reading = tokio::spawn(async move {
            let mut input = BufReader::new(input).lines();
            while let Ok(Some(line)) = input.next_line().await {
                if line.trim().is_empty() {
                    continue;
                }
                let forwarded = match message::check(line.as_bytes()) {
                    Ok(()) => to_server.write_all(format!("{line}\n").as_bytes()).await,
                    Err(error) => {
                        let _ = errors.send(format!("{error}\n").into_bytes()).await;
                        Ok(())
                    }
                };
                if forwarded.is_err() {
                    break;
                }
            }
        });
        let answering = tokio::spawn(async move {
            let mut answers = BufReader::new(from_server).lines();
            while let Ok(Some(line)) = answers.next_line().await {
                if lines.send(format!("{line}\n").into_bytes()).await.is_err() {
                    break;
                }
            }
        });
        let writing = tokio::spawn(async move {
            while let Some(line) = outgoing.recv().await {
                if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                    break;
                }
            }
        });

        let session = Session::new(self.shared().clone(), Origin::Fixed, Some(caller));
        let served = match session.serve((server_input, server_output)).await {
            Ok(running) => running
                .waiting()
                .await
                .map(drop)
                .map_err(|error| ServeError::Protocol(error.to_string())),
            Err(error) => Err(ServeError::Protocol(error.to_string())),
        };
        reading.abort();
        let _ = answering.await;
        let _ = writing.await;
        served
    }
}
