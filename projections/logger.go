package projections

import (
	"github.com/ThreeDotsLabs/watermill"
	"github.com/sirupsen/logrus"
)

// watermillLogger adapts logrus to Watermill. Watermill's info-level chatter is demoted to
// debug: the router's life is reported by our own log lines.
type watermillLogger struct{ log logrus.FieldLogger }

func (l watermillLogger) Error(msg string, err error, fields watermill.LogFields) {
	l.log.WithFields(logrus.Fields(fields)).WithError(err).Error(msg)
}
func (l watermillLogger) Info(msg string, fields watermill.LogFields) {
	l.log.WithFields(logrus.Fields(fields)).Debug(msg)
}
func (l watermillLogger) Debug(msg string, fields watermill.LogFields) {
	l.log.WithFields(logrus.Fields(fields)).Debug(msg)
}
func (l watermillLogger) Trace(msg string, fields watermill.LogFields) {
	l.log.WithFields(logrus.Fields(fields)).Trace(msg)
}
func (l watermillLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return watermillLogger{l.log.WithFields(logrus.Fields(fields))}
}
