{{- define "swarm-operator.name" -}}swarm-operator{{- end -}}
{{- define "swarm-operator.labels" -}}
app.kubernetes.io/name: swarm-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
