//! Stdio: one session on the process's standard streams, one JSON-RPC message per line.
//!
//! Lines pass through a filter before rmcp reads them, so that a malformed line gets its
//! JSON-RPC error on stdout, as the specification asks, and the session goes on; rmcp alone
//! would skip it without an answer. Lines are read as bytes: one that is not UTF-8 gets
//! `-32700`, and one over 4 MiB `-32600` (`message_too_large`) with its request's id, and
//! neither ends the session.

use portcullis_core::CallContext;
use rmcp::ServiceExt;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, duplex,
};
use tokio::sync::mpsc;

use crate::handler::{Handler, Origin};
use crate::message;
use crate::server::{McpServer, ServeError};

/// The buffer between the filter and rmcp, in each direction.
const PIPE_BYTES: usize = 64 * 1024;

/// The longest line read as a message, as over HTTP; the rest of a longer line is skipped as
/// it arrives, never held.
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// How much of a line too long to read is kept, to find its request's id.
const HEAD_BYTES: usize = 4 * 1024;

/// One line of input, without its end.
enum Line {
    /// The line's bytes, UTF-8 or not.
    Whole(Vec<u8>),
    /// The start of a line longer than [`MAX_LINE_BYTES`].
    TooLong(Vec<u8>),
}

/// The next line of `input`, or `None` at its end; reads a line too long to take only as far as
/// needed to skip it.
async fn next_line(input: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => Some(Line::TooLong(line)),
                (false, true) => None,
                (false, false) => Some(Line::Whole(line)),
            });
        }
        let end = available.iter().position(|&byte| byte == b'\n');
        let chunk = &available[..end.unwrap_or(available.len())];
        if too_long {
            let room = HEAD_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..room.min(chunk.len())]);
        } else if line.len() + chunk.len() > MAX_LINE_BYTES {
            too_long = true;
            line.truncate(HEAD_BYTES);
            let room = HEAD_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..room.min(chunk.len())]);
        } else {
            line.extend_from_slice(chunk);
        }
        let used = end.map_or(available.len(), |end| end + 1);
        input.consume(used);
        if end.is_some() {
            if line.last() == Some(&b'\r') && !too_long {
                line.pop();
            }
            return Ok(Some(if too_long {
                Line::TooLong(line)
            } else {
                Line::Whole(line)
            }));
        }
    }
}

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
            let mut input = BufReader::new(input);
            while let Ok(Some(line)) = next_line(&mut input).await {
                let forwarded = match line {
                    Line::Whole(line) if line.trim_ascii().is_empty() => continue,
                    Line::Whole(line) => {
                        match message::check(&line).and_then(|()| message::client_message(&line)) {
                            Ok(()) => {
                                let mut forwarded = line;
                                forwarded.push(b'\n');
                                to_server.write_all(&forwarded).await
                            }
                            Err(error) => {
                                let _ = errors.send(format!("{error}\n").into_bytes()).await;
                                Ok(())
                            }
                        }
                    }
                    Line::TooLong(head) => {
                        let error = message::too_large(&head, MAX_LINE_BYTES);
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

        let handler = Handler::new(self.shared().clone(), Origin::Fixed(caller));
        let served = match handler.serve((server_input, server_output)).await {
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
